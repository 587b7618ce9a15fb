require ["editheader", "fileinto"];
addheader "X-Sieved" "yes";
if header :is "x-sieved" "yes" { fileinto "Sieved"; }
