/* SPDX-License-Identifier: MIT */
/*
 * delivery: repository_root is matched against --repository-allow and
 * written below it without ever leaving it ('..', symbolic links, long
 * paths). Every test works in a fresh temporary directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "delivery.h"
#include "harness.h"

static char tmp[PATH_MAX];

/* A fresh temporary directory, resolved (the allow list holds realpaths). */
static const char *tmp_new(void)
{
	const char *base = getenv("TMPDIR");
	char *real;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s/profd-test-delivery-XXXXXX",
			     base && *base ? base : P_tmpdir) >= sizeof(tmp) ||
	    !mkdtemp(tmp))
		TEST_FAIL("mkdtemp: %s", strerror(errno));
	real = realpath(tmp, NULL);
	if (!real)
		TEST_FAIL("realpath: %s", strerror(errno));
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s", real) >= sizeof(tmp))
		TEST_FAIL("temporary directory name too long");
	free(real);
	return tmp;
}

static void tmp_remove(void)
{
	char cmd[PATH_MAX + 16];

	/* rm copes with trees deeper than PATH_MAX, which one test builds. */
	if ((size_t)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp) >= sizeof(cmd) || system(cmd) != 0)
		fprintf(stderr, "  warning: could not remove %s\n", tmp);
}

/* <tmp>/<rel>. Rotates over a few buffers: one call may take two. */
static const char *path(const char *rel)
{
	static char p[4][PATH_MAX];
	static unsigned i;
	char *b = p[i++ % 4];

	if ((size_t)snprintf(b, PATH_MAX, "%s/%s", tmp, rel) >= PATH_MAX)
		TEST_FAIL("path too long: %s", rel);
	return b;
}

static void mkdir_ok(const char *p)
{
	if (mkdir(p, 0755) < 0)
		TEST_FAIL("mkdir %s: %s", p, strerror(errno));
}

static bool exists(const char *p)
{
	struct stat st;

	return lstat(p, &st) == 0;
}

/* Names in directory @p, "." and ".." not counted. */
static int entries(const char *p)
{
	DIR *d = opendir(p);
	struct dirent *e;
	int n = 0;

	if (!d)
		TEST_FAIL("opendir %s: %s", p, strerror(errno));
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

static void read_file(const char *p, char *buf, size_t size)
{
	FILE *f = fopen(p, "r");
	size_t n;

	if (!f)
		TEST_FAIL("open %s: %s", p, strerror(errno));
	n = fread(buf, 1, size - 1, f);
	buf[n] = 0;
	fclose(f);
}

/* Allow <tmp>/allowed and return the list. */
static void allow(struct repo_allow *a)
{
	mkdir_ok(path("allowed"));
	*a = (struct repo_allow){0};
	ASSERT_OK(repo_allow_add(a, path("allowed")));
	ASSERT_EQ(a->n, 1);
	ASSERT_STREQ(a->dirs[0], path("allowed"));
}

TEST(repo_allow_add_needs_an_existing_directory_and_resolves_links)
{
	struct repo_allow a = {0};

	tmp_new();
	ASSERT_EQ(repo_allow_add(&a, path("missing")), -ENOENT);
	if (close(open(path("file"), O_CREAT | O_WRONLY, 0644)) < 0)
		TEST_FAIL("create");
	ASSERT_EQ(repo_allow_add(&a, path("file")), -ENOTDIR);
	ASSERT_EQ(a.n, 0);
	/* Allowed through a link: the list holds where it points. */
	mkdir_ok(path("real"));
	if (symlink(path("real"), path("link")) < 0)
		TEST_FAIL("symlink");
	ASSERT_OK(repo_allow_add(&a, path("link")));
	ASSERT_STREQ(a.dirs[0], path("real"));
	repo_allow_free(&a);
	ASSERT_EQ(a.n, 0);
	tmp_remove();
}

TEST(repo_match_inside_gives_the_relative_part)
{
	struct repo_allow a;
	size_t dir = 99;
	char *rel = NULL;

	tmp_new();
	allow(&a);
	ASSERT_EQ(repo_match(&a, path("allowed"), &dir, &rel), 1);
	ASSERT_EQ(dir, 0);
	ASSERT_STREQ(rel, "");
	free(rel);
	ASSERT_EQ(repo_match(&a, path("allowed/"), &dir, &rel), 1);
	ASSERT_STREQ(rel, "");
	free(rel);
	ASSERT_EQ(repo_match(&a, path("allowed//run1/plugins"), &dir, &rel), 1);
	ASSERT_STREQ(rel, "run1/plugins");
	free(rel);
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_match_outside_the_allowed_directories_is_refused)
{
	struct repo_allow a;
	size_t dir = 99;
	char *rel = (char *)"untouched";

	tmp_new();
	allow(&a);
	/* Not below: in-band delivery only, nothing returned. */
	ASSERT_EQ(repo_match(&a, path("other"), &dir, &rel), 0);
	ASSERT_EQ(repo_match(&a, tmp, &dir, &rel), 0);
	/* A sibling that shares the prefix is not inside (component-wise). */
	ASSERT_EQ(repo_match(&a, path("allowed-evil/x"), &dir, &rel), 0);
	ASSERT_EQ(repo_match(&a, path("allowedx"), &dir, &rel), 0);
	/* Relative roots are never matched (against which cwd?). */
	ASSERT_EQ(repo_match(&a, "allowed/x", &dir, &rel), 0);
	ASSERT_EQ(repo_match(&a, "", &dir, &rel), 0);
	ASSERT_EQ(dir, 99);
	ASSERT_STREQ(rel, "untouched");
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_match_refuses_dotdot_and_dot_components)
{
	struct repo_allow a;
	size_t dir;
	char *rel = NULL;

	tmp_new();
	allow(&a);
	ASSERT_EQ(repo_match(&a, path("allowed/.."), &dir, &rel), -EINVAL);
	ASSERT_EQ(repo_match(&a, path("allowed/../other"), &dir, &rel), -EINVAL);
	ASSERT_EQ(repo_match(&a, path("allowed/run/../../other"), &dir, &rel), -EINVAL);
	ASSERT_EQ(repo_match(&a, path("allowed/./run"), &dir, &rel), -EINVAL);
	ASSERT_EQ(repo_match(&a, path("allowed/run\nforged"), &dir, &rel), -EINVAL);
	ASSERT_TRUE(rel == NULL);
	/* Dots inside a name are just a name. */
	ASSERT_EQ(repo_match(&a, path("allowed/..run/.x"), &dir, &rel), 1);
	ASSERT_STREQ(rel, "..run/.x");
	free(rel);
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_match_refuses_components_longer_than_name_max)
{
	struct repo_allow a;
	char name[300], root[PATH_MAX + 400];
	size_t dir;
	char *rel = NULL;

	tmp_new();
	allow(&a);
	memset(name, 'n', 256);
	name[256] = 0;
	if ((size_t)snprintf(root, sizeof(root), "%s/allowed/%s", tmp, name) >= sizeof(root))
		TEST_FAIL("root too long");
	ASSERT_EQ(repo_match(&a, root, &dir, &rel), -EINVAL); /* > NAME_MAX */
	name[255] = 0;
	if ((size_t)snprintf(root, sizeof(root), "%s/allowed/%s", tmp, name) >= sizeof(root))
		TEST_FAIL("root too long");
	ASSERT_EQ(repo_match(&a, root, &dir, &rel), 1);
	ASSERT_EQ(strlen(rel), 255);
	free(rel);
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_write_creates_directories_and_the_file)
{
	struct repo_allow a;
	char buf[64];

	tmp_new();
	allow(&a);
	ASSERT_OK(repo_write(a.dirs[0], "run1/plugins/profile", "2026_01_01", "host.xplane.pb", "abc", 3));
	read_file(path("allowed/run1/plugins/profile/2026_01_01/host.xplane.pb"), buf, sizeof(buf));
	ASSERT_STREQ(buf, "abc");
	/* A second write replaces the file whole, and leaves no temporary. */
	ASSERT_OK(repo_write(a.dirs[0], "run1/plugins/profile", "2026_01_01", "host.xplane.pb", "xy", 2));
	read_file(path("allowed/run1/plugins/profile/2026_01_01/host.xplane.pb"), buf, sizeof(buf));
	ASSERT_STREQ(buf, "xy");
	ASSERT_EQ(entries(path("allowed/run1/plugins/profile/2026_01_01")), 1);
	ASSERT_OK(repo_write(a.dirs[0], "", "s", "f", "", 0)); /* rel "" = the directory itself */
	ASSERT_TRUE(exists(path("allowed/s/f")));
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_write_refuses_bad_session_and_file_names)
{
	struct repo_allow a;

	tmp_new();
	allow(&a);
	ASSERT_EQ(repo_write(a.dirs[0], "", "..", "f", "x", 1), -EINVAL);
	ASSERT_EQ(repo_write(a.dirs[0], "", "s/../..", "f", "x", 1), -EINVAL);
	ASSERT_EQ(repo_write(a.dirs[0], "", "s", "../../escaped", "x", 1), -EINVAL);
	ASSERT_EQ(repo_write(a.dirs[0], "", "s", "", "x", 1), -EINVAL);
	ASSERT_TRUE(!exists(path("escaped")));
	ASSERT_TRUE(!exists(path("allowed/s")));
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_write_refuses_a_symlink_planted_on_the_way)
{
	struct repo_allow a;

	tmp_new();
	allow(&a);
	mkdir_ok(path("outside"));
	/* A link inside the allowed directory that leads out of it ... */
	if (symlink(path("outside"), path("allowed/run")) < 0)
		TEST_FAIL("symlink");
	/* ... as a directory on the way, and as the session directory. */
	ASSERT_EQ(repo_write(a.dirs[0], "run/plugins", "s", "f", "x", 1), -ELOOP);
	ASSERT_EQ(repo_write(a.dirs[0], "", "run", "f", "x", 1), -ELOOP);
	ASSERT_TRUE(!exists(path("outside/plugins")));
	ASSERT_TRUE(!exists(path("outside/f")));
	/* A regular file on the way is not a link: reported as such. */
	if (close(open(path("allowed/file"), O_CREAT | O_WRONLY, 0644)) < 0)
		TEST_FAIL("create");
	ASSERT_EQ(repo_write(a.dirs[0], "file", "s", "f", "x", 1), -ENOTDIR);
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_write_replaces_a_planted_link_at_the_file_name_without_following_it)
{
	struct repo_allow a;
	char buf[16];

	tmp_new();
	allow(&a);
	mkdir_ok(path("allowed/s"));
	if (close(open(path("victim"), O_CREAT | O_WRONLY, 0644)) < 0)
		TEST_FAIL("create");
	if (symlink(path("victim"), path("allowed/s/f")) < 0)
		TEST_FAIL("symlink");
	/* rename() replaces the link itself; the target stays empty. */
	ASSERT_OK(repo_write(a.dirs[0], "", "s", "f", "data", 4));
	read_file(path("victim"), buf, sizeof(buf));
	ASSERT_STREQ(buf, "");
	read_file(path("allowed/s/f"), buf, sizeof(buf));
	ASSERT_STREQ(buf, "data");
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_write_walks_paths_longer_than_path_max)
{
	struct repo_allow a;
	char rel[PATH_MAX + 1024], name[201];
	size_t n = 0;
	int fd;

	tmp_new();
	allow(&a);
	memset(name, 'd', 200);
	name[200] = 0;
	/* 25 components of 200 bytes: longer than PATH_MAX, each one fine. */
	for (int i = 0; i < 25; i++)
		n += (size_t)snprintf(rel + n, sizeof(rel) - n, "%s%s", i ? "/" : "", name);
	ASSERT_TRUE(n > PATH_MAX);
	ASSERT_OK(repo_write(a.dirs[0], rel, "s", "f", "deep", 4));
	/* Check it through the same openat() walk (open() would fail with
	 * ENAMETOOLONG on the whole path). */
	fd = open(a.dirs[0], O_RDONLY | O_DIRECTORY);
	for (int i = 0; i < 25 && fd >= 0; i++) {
		int next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);

		close(fd);
		fd = next;
	}
	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(faccessat(fd, "s/f", F_OK, 0));
	close(fd);
	repo_allow_free(&a);
	tmp_remove();
}

TEST_MAIN()
