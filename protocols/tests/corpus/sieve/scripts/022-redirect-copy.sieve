require "copy";
if header :contains "subject" "budget" { redirect :copy "cfo@example.com"; }
