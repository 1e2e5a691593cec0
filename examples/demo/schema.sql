CREATE TABLE branches (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE accounts (
    id      bigint PRIMARY KEY,
    branch  int NOT NULL,
    balance bigint NOT NULL,
    filler  char(84) NOT NULL
);
