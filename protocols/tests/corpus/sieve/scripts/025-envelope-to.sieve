require ["envelope", "fileinto"];
if envelope :localpart :is "to" "me+shopping" { fileinto "Shopping"; }
