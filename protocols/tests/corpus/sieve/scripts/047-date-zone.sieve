require ["date", "fileinto"];
if date :zone "+0000" "date" "hour" "23" { fileinto "LateUTC"; }
if date :originalzone "date" "hour" "23" { fileinto "LateLocal"; }
