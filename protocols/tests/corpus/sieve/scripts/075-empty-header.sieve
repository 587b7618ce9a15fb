require "fileinto";
if header :is "subject" "" { fileinto "EmptySubject"; }
if header :contains "subject" "" { fileinto "HasSubject"; }
