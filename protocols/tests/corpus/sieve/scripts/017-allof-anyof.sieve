require "fileinto";
if allof (address :domain :is "from" "example.net", anyof (header :contains "subject" "lunch", size :over 1M)) { fileinto "Food"; }
else { fileinto "Other"; }
