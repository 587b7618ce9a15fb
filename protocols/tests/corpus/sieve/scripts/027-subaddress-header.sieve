require ["fileinto", "subaddress"];
if address :detail :matches "to" "*" { fileinto "Tagged"; }
if address :user :is "reply-to" "team" { fileinto "Team"; }
