require ["include", "fileinto"];
include :personal "spam-rules";
if header :contains "subject" "lunch" { fileinto "Lunch"; }
