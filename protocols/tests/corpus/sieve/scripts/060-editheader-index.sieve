require ["editheader", "index", "fileinto", "relational", "comparator-i;ascii-numeric"];
addheader :last "X-A" "1";
addheader :last "X-A" "2";
deleteheader :index 1 "x-a";
if header :is "x-a" "2" { fileinto "Second"; }
if header :count "eq" :comparator "i;ascii-numeric" "x-a" "1" { fileinto "One"; }
