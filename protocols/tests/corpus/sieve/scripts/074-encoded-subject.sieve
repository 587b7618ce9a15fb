require "fileinto";
if header :contains "subject" "café" { fileinto "Cafe"; }
if address :contains "from" "eloise" { fileinto "Eloise"; }
