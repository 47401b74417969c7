"""`emasr report`: the paper's table, GMM baselines, intervals and plots from exp dirs."""
