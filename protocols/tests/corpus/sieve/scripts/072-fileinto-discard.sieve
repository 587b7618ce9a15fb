require "fileinto";
fileinto "A";
if header :contains "subject" "lunch" { discard; }
