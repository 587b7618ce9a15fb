require "fileinto";
if address :domain :is "from" "example.net" { fileinto "Net"; }
elsif address :domain :is "from" "example.com" { fileinto "Com"; }
elsif address :domain :is "from" "example.org" { fileinto "Org"; }
else { fileinto "Elsewhere"; }
