# FB_Hadoop flow sizes: a Hadoop cluster's flows measured in Roy et al.,
# "Inside the Social Network's (Datacenter) Network", SIGCOMM 2015 (§5,
# Fig. 6), as the piecewise-linear CDF the HPCC paper's traffic generator
# samples (Li et al., SIGCOMM 2019, §5.1; the table in
# github.com/alibaba-edu/High-Precision-Congestion-Control
# traffic_gen/FbHdp_distribution.txt). Most flows are under 1 KB; the mean
# is carried by the 3% above 1 MB.
# Columns: flow size in bytes, cumulative percentage of flows. Sizes are
# drawn by linear interpolation between the points (scripts/fct-experiment).
0 0
100 1
200 2
300 5
350 15
400 20
500 30
600 40
700 50
1000 60
2000 67
7000 70
30000 72
50000 82
80000 87
120000 90
300000 95
1000000 97.5
2000000 99
10000000 100
