require ["comparator-i;ascii-numeric", "fileinto"];
if header :comparator "i;ascii-numeric" :is "x-priority" "1" { fileinto "P1"; }
