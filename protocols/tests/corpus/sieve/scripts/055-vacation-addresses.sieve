require "vacation";
vacation :addresses ["staff@example.org", "dev@lists.example.com"] "Away.";
