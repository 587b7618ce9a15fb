if not header :contains "subject" ["lunch", "meeting"] { discard; }
