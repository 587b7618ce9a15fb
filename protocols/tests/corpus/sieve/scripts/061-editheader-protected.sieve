require ["editheader", "fileinto", "relational", "comparator-i;ascii-numeric"];
deleteheader "received";
if header :count "ge" :comparator "i;ascii-numeric" "received" "1" { fileinto "Kept"; }
