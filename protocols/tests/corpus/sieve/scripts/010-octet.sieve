require "fileinto";
if header :comparator "i;octet" :contains "subject" "URGENT" { fileinto "Urgent"; }
if header :comparator "i;octet" :contains "subject" "urgent" { fileinto "lower"; }
