require ["index", "date", "fileinto"];
if date :index 1 :zone "+0000" "received" "hour" "10" { fileinto "TenOClock"; }
