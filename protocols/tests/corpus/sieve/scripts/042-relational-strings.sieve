require ["relational", "fileinto", "comparator-i;ascii-numeric"];
if header :value "lt" "subject" "M" { fileinto "AtoL"; }
if header :count "eq" :comparator "i;ascii-numeric" "received" "2" { fileinto "TwoHops"; }
