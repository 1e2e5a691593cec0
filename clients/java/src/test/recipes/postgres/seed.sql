create table notes(id serial primary key, who text not null); insert into notes(who) values ('golden');
