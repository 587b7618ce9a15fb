require ["relational", "comparator-i;ascii-numeric", "fileinto"];
if header :value "ge" :comparator "i;ascii-numeric" "x-spam-score" "10" { fileinto "Junk"; }
elsif header :value "ge" :comparator "i;ascii-numeric" "x-spam-score" "3" { fileinto "Maybe"; }
