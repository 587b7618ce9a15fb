require ["envelope", "fileinto"];
if envelope :domain :is "from" "lists.example.com" { fileinto "Lists"; }
if envelope :is "from" "" { fileinto "Bounces"; }
