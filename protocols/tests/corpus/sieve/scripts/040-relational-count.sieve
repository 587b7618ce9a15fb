require ["relational", "comparator-i;ascii-numeric", "fileinto"];
if address :count "ge" :comparator "i;ascii-numeric" ["to", "cc"] "3" { fileinto "Crowd"; }
