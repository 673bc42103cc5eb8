"""Small models several test files use (one copy)."""

#: a counter x in 0..3: 'up' moves up with probability 1/2, 'stay' stays; "top" at x = 3
UP_STAY = """mdp
module m
  x : [0..3] init 0;
  [up] x<3 -> 0.5 : (x'=x+1) + 0.5 : (x'=x);
  [stay] true -> (x'=x);
endmodule
label "top" = x=3;
"""
