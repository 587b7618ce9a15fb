require ["date", "relational", "fileinto"];
if date :zone "+0000" :value "lt" "date" "date" "2026-12-10" { fileinto "BeforeTenth"; }
