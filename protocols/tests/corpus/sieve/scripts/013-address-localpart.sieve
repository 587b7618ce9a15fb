require "fileinto";
if address :localpart :matches "from" "*-bot" { fileinto "Bots"; }
elsif address :localpart :is "from" "mailer-daemon" { fileinto "Bounces"; }
