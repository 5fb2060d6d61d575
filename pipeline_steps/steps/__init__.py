"""One module per pipeline step; each turns the build context into SDK step objects."""
