require "fileinto";
if header :is "subject" "Lunch on Friday" { fileinto "Lunch"; }
