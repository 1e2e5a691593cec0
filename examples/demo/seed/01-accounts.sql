-- About 3 million rows, ~400 MB with its index. Change the count to taste.
INSERT INTO accounts
SELECT g, g % 100, 0, ''
FROM generate_series(1, 3000000) AS g;
