require ["body", "fileinto"];
if body :contains "prize" { fileinto "Prize"; }
if body :text :contains "report" { fileinto "Reports"; }
