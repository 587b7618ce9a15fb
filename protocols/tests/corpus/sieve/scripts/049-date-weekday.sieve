require ["date", "fileinto"];
if date :zone "+0000" :is "date" "weekday" ["0", "6"] { fileinto "Weekend"; }
