require ["index", "fileinto"];
if header :index 1 :contains "received" "mx1.example.net by mx.example.org" { fileinto "FirstHop"; }
if header :index 1 :last :contains "received" "client" { fileinto "Origin"; }
