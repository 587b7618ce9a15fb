require "x-unknown-thing";
keep;
