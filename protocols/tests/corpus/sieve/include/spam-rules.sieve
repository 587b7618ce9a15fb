require ["fileinto", "relational", "comparator-i;ascii-numeric"];
if header :value "ge" :comparator "i;ascii-numeric" "x-spam-score" "5" { fileinto "Junk"; stop; }
