require ["imap4flags", "fileinto", "relational", "comparator-i;ascii-numeric"];
addflag "$Label1";
if hasflag :contains "label" { fileinto "Labelled"; }
if hasflag :count "ge" :comparator "i;ascii-numeric" "2" { fileinto "Two"; }
