CREATE TABLE notes(id int AUTO_INCREMENT PRIMARY KEY, who varchar(200) NOT NULL); INSERT INTO notes(who) VALUES ('golden');
