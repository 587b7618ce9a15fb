require "fileinto";
if address :is "from" "alice@example.net" { fileinto "Alice"; }
