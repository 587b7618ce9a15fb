require "include";
include :optional "does-not-exist";
keep;
