require "vacation";
vacation :days 3 :subject "Away" "I am on holiday until January.";
