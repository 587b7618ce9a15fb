require "fileinto";
if address :is "to" "you@example.org" { fileinto "Group"; }
if address :contains "to" "john" { fileinto "John"; }
