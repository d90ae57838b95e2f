"""Direct convolution family: output-stationary tiles staged through shared memory."""
