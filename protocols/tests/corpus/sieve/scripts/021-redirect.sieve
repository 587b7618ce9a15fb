if address :is "from" "boss@example.org" { redirect "assistant@example.com"; }
