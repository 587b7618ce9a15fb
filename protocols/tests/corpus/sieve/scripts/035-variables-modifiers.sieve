require ["variables", "fileinto"];
if address :localpart :matches "from" "*" { set :lower :upperfirst "who" "${1}"; fileinto "From-${who}"; }
