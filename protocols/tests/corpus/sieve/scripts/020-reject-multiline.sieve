require "reject";
if header :matches "from" "*spam*" {
  reject text:
Go away.
..Really.
.
;
}
