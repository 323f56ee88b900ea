# WebSearch flow sizes: the web-search cluster's background and query
# traffic measured in Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM
# 2010 (§2.2, Fig. 4), as the piecewise-linear CDF the HPCC paper's traffic
# generator samples (Li et al., SIGCOMM 2019, §5.1; the table in
# github.com/alibaba-edu/High-Precision-Congestion-Control
# traffic_gen/WebSearch_distribution.txt). Mean about 1.7 MB.
# Columns: flow size in bytes, cumulative percentage of flows. Sizes are
# drawn by linear interpolation between the points (scripts/fct-experiment).
0 0
10000 15
20000 20
30000 30
50000 40
80000 53
200000 60
1000000 70
2000000 80
5000000 90
10000000 97
30000000 100
