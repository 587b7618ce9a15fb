require ["date", "relational", "fileinto"];
if currentdate :value "ge" "year" "2020" { fileinto "Now"; }
