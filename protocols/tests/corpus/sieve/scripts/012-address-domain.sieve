require "fileinto";
if address :domain :is ["from", "sender"] "example.com" { fileinto "dotcom"; }
