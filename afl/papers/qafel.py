"""QAFeL (Ortega & Jafarkhani, ``shared/papers/003_*``): Tables 1 and 2 (App. E) and the numbers Sec. 4 and App. E
state for Figs 3 and 4. "We perform each experiment three times" (Sec. 4); the target is 90 % validation accuracy
on CelebA."""
from ..claims.paper import Statement, Table, stated

FILE = "003_9a7e2d6a0043de69.txt"
SEEDS = 3
COLUMNS = ("Uploads (in thousands)", "kB/upload", "kB/download")
UNITS = ("k uploads", "kB", "kB")

#: Table 1: uploads to 90 % (thousands, mean ± std over 3 runs) and message sizes, per qsgd client/server bits
TABLE1 = Table("QAFeL", "Table 1", COLUMNS, {
    "FedBuff": "26.1 ± 6.7 | 117.128 | 117.128",
    "client 8-bit qsgd, server 8-bit qsgd": "27.6 ± 4.82 | 29.924 | 29.924",
    "client 8-bit qsgd, server 4-bit qsgd": "29.8 ± 2.76 | 29.924 | 15.380",
    "client 8-bit qsgd, server 2-bit qsgd": "35.7 ± 14.5 | 29.924 | 8.108",
    "client 4-bit qsgd, server 8-bit qsgd": "39.7 ± 3.32 | 15.380 | 29.924",
    "client 4-bit qsgd, server 4-bit qsgd": "27.8 ± 10.4 | 15.380 | 15.380",
    "client 4-bit qsgd, server 2-bit qsgd": "37.7 ± 9.10 | 15.380 | 8.108",
    "client 2-bit qsgd, server 8-bit qsgd": "58.6 ± 7.16 | 8.108 | 29.924",
    "client 2-bit qsgd, server 4-bit qsgd": "74.6 ± 35.7 | 8.108 | 15.380",
    "client 2-bit qsgd, server 2-bit qsgd": "91.9 ± 34.4 | 8.108 | 8.108"}, seeds=SEEDS, unit=UNITS)

#: Table 2: the server sends the top 10 % of coordinates (the 2-bit row's * in the paper: two runs reached 90 %)
TABLE2 = Table("QAFeL", "Table 2", COLUMNS, {
    "FedBuff": "26.1 ± 6.7 | 117.128 | 117.128",
    "QAFeL (client 8-bit qsgd)": "39.5 ± 10.2 | 29.924 | 15.404",
    "QAFeL (client 4-bit qsgd)": "42.4 ± 10.4 | 15.380 | 15.404",
    "QAFeL (client 2-bit qsgd)": "94.8 ± 16.7* | 8.108 | 15.404"}, seeds=SEEDS, unit=UNITS)

#: one measurement stated twice: with messages 117.128 / 15.380 = 7.616 times smaller, 1-1.5 times the updates is
#: 5.1-7.6 times fewer MB (the broadcasts follow the uploads, one per buffer of Z)
FIG3 = Statement("QAFeL", "Sec. 4 (Fig. 3)", "we decrease the MB uploaded by 5.2-8 times and similarly decrease the MB "
                 "broadcasted. The number of client updates is only 1-1.5 times higher",
                 (stated("QAFeL", "Sec. 4 (Fig. 3)", "5.2", "×"), stated("QAFeL", "Sec. 4 (Fig. 3)", "8", "×"),
                  stated("QAFeL", "Sec. 4 (Fig. 3)", "1.5", "×")))
MESSAGE = Statement("QAFeL", "Sec. 4", "accounts for approximately a 8 times reduction in message size")
FIG4_SAVES = Statement("QAFeL", "App. E (Fig. 4)", "In all cases QAFeL saves at least $3\\times$ upload cost and "
                       "$2\\times$ broadcast cost")
#: one measurement: the same uploads with 7.616 times smaller messages is the 7 times fewer MB
FIG4_SAME = Statement("QAFeL", "App. E (Fig. 4)", "in 4-bit qsgd client and server, the convergence speed is the "
                      "same for both algorithms, and the upload message size goes down from 3052 MB to 428 MB, a "
                      "$7\\times$ decrease", (stated("QAFeL", "App. E (Fig. 4)", "7", "×"),))
MORE_UPLOADS = Statement("QAFeL", "App. E", "the number of uploads augments from 4-bit to 2-bit client qsgd")
SERVER_DOWNLOAD = Statement("QAFeL", "App. E", "quantizing with less precision at the server always results in less "
                            "total bytes downloaded")
MORE_MESSAGES = Statement("QAFeL", "App. E", "more messages will have to be sent to reach the target accuracy")
#: Fig. 3's concurrencies (App. D): clients training in parallel
FIG3_CONCURRENCIES = (100, 500, 1000)

__all__ = ["FILE", "SEEDS", "TABLE1", "TABLE2", "FIG3", "MESSAGE", "FIG4_SAVES", "FIG4_SAME",
           "MORE_UPLOADS", "SERVER_DOWNLOAD", "MORE_MESSAGES", "FIG3_CONCURRENCIES"]
