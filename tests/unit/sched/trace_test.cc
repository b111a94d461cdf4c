#include "sched/trace.h"

#include <gtest/gtest.h>

#include <sstream>

#include "core/error.h"

namespace dl {
namespace {

std::string error_of(std::string_view text) {
  try {
    parse_trace(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Trace, FourColumns) {
  const auto jobs = parse_trace("job_id,submit_s,duration_s,num_gpu\n1,0,60,4\n2,10.5,3600,1\n");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].id, 1u);
  EXPECT_EQ(jobs[0].gpus, 4u);
  EXPECT_DOUBLE_EQ(jobs[1].submit_s, 10.5);
  EXPECT_DOUBLE_EQ(jobs[1].duration_s, 3600);
  EXPECT_FALSE(jobs[1].checkpointable);
  EXPECT_EQ(jobs[1].user, "");
}

TEST(Trace, OptionalColumnsSpacesCrlfAndBlankLines) {
  const auto jobs = parse_trace(
      "job_id, submit_s, duration_s, num_gpu, user, checkpointable\r\n"
      "\r\n"
      " 7 , 0 , 1e3 , 2 , alice , 1 \r\n"
      "8,5,20,1,bob,0");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].user, "alice");
  EXPECT_TRUE(jobs[0].checkpointable);
  EXPECT_DOUBLE_EQ(jobs[0].duration_s, 1000);
  EXPECT_FALSE(jobs[1].checkpointable);
  const auto five = parse_trace("job_id,submit_s,duration_s,num_gpu,user\n1,0,1,1,u\n");
  EXPECT_EQ(five[0].user, "u");
}

TEST(Trace, MalformedRowsNameTheirLine) {
  const std::string h = "job_id,submit_s,duration_s,num_gpu,user,checkpointable\n";
  EXPECT_EQ(error_of(""),
            "line 1: empty trace: expected the header job_id,submit_s,duration_s,num_gpu");
  EXPECT_EQ(error_of("id,submit,duration,gpus\n"),
            "line 1: header 'id,submit,duration,gpus': no column job_id: expected the columns "
            "job_id, submit_s, duration_s and num_gpu (in any order; user, checkpointable "
            "optional; others are ignored)");
  EXPECT_EQ(error_of("job_id,submit_s,duration_s,user\n"),
            "line 1: header 'job_id,submit_s,duration_s,user': no column num_gpu: expected the "
            "columns job_id, submit_s, duration_s and num_gpu (in any order; user, "
            "checkpointable optional; others are ignored)");
  EXPECT_EQ(error_of("job_id,submit_s,duration_s,num_gpu,submit_s\n"),
            "line 1: header: column submit_s appears twice");
  EXPECT_EQ(error_of(h + ",0,60,4,u,1\n"), "line 2: job_id is empty");
  EXPECT_EQ(error_of(h + "1,0,60,4,u,1\n2,0,60,4\n"), "line 3: 4 fields, the header has 6");
  EXPECT_EQ(error_of(h + "x,0,60,4,u,1\ny,0,60,4,u,1\nx,0,60,4,u,1\n"),
            "line 4: job_id x already used on line 2");
  EXPECT_EQ(error_of(h + "5,0,60,4,u,1\n05,0,60,4,u,1\n"),
            "line 3: job_id 05 already used on line 2");
  EXPECT_EQ(error_of(h + "1,-1,60,4,u,1\n"),
            "line 2: submit_s='-1': expected a number of seconds >= 0 and at most 1e12");
  EXPECT_EQ(error_of(h + "1,0,0,4,u,1\n"),
            "line 2: duration_s='0': expected a number of seconds > 0 and at most 1e12");
  EXPECT_EQ(error_of(h + "1,0,nan,4,u,1\n"),
            "line 2: duration_s='nan': expected a number of seconds > 0 and at most 1e12");
  EXPECT_EQ(error_of(h + "1,0,60,0,u,1\n"),
            "line 2: num_gpu='0': expected a whole number from 1 to 1048576");
  EXPECT_EQ(error_of(h + "1,0,60,2.5,u,1\n"),
            "line 2: num_gpu='2.5': expected a whole number from 1 to 1048576");
  EXPECT_EQ(error_of(h + "1,0,60,4,u,yes\n"), "line 2: checkpointable='yes': expected 0 or 1");
  EXPECT_EQ(error_of(h + "1,0,60,4,\"u\",1\n"), "line 2: user='\"u\"': quotes are not allowed");
  EXPECT_EQ(error_of(h + "\n5,0,60,4,u,1\n5,1,60,4,u,1\n"),
            "line 4: job_id 5 already used on line 3");
  EXPECT_EQ(error_of(h + std::string("1,0,60,4,u\0,1\n", 14)), "line 2: NUL byte in the line");
}

// Public traces as they come: string job ids, the columns in any order, extra ones.
TEST(Trace, StringIdsColumnsByNameExtraColumnsIgnored) {
  const auto jobs = parse_trace(
      "state,num_gpu,job_id,vc,submit_s,duration_s,checkpointable\n"
      "COMPLETED,8,application_1506638472019_10238,vc1,0,60,1\n"
      "FAILED,1,a3f9c2,vc2,10,5,0\n");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].name, "application_1506638472019_10238");
  EXPECT_EQ(jobs[0].id, 1u);  // not all numeric: the row
  EXPECT_EQ(jobs[1].id, 2u);
  EXPECT_EQ(jobs[0].gpus, 8u);
  EXPECT_TRUE(jobs[0].checkpointable);
  EXPECT_DOUBLE_EQ(jobs[1].submit_s, 10);
  EXPECT_DOUBLE_EQ(jobs[1].duration_s, 5);
  EXPECT_EQ(jobs[1].user, "");
  // All numeric: the numbers, as before.
  const auto numeric = parse_trace("num_gpu,job_id,submit_s,duration_s,x\n2,17,0,1,y\n");
  EXPECT_EQ(numeric[0].id, 17u);
  EXPECT_EQ(numeric[0].name, "17");
  // A string id is written back as it was.
  std::ostringstream out;
  write_trace(out, jobs);
  EXPECT_EQ(parse_trace(out.str())[0].name, "application_1506638472019_10238");
}

TEST(Trace, WriteReadsBack) {
  std::vector<TraceJob> jobs = {{1, 0, 60, 4, "a", true, ""},
                                {2, 12.25, 3600.5, 32, "b", false, ""}};
  std::ostringstream out;
  write_trace(out, jobs);
  const auto back = parse_trace(out.str());
  ASSERT_EQ(back.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back[i].id, jobs[i].id);
    EXPECT_EQ(back[i].submit_s, jobs[i].submit_s);
    EXPECT_EQ(back[i].duration_s, jobs[i].duration_s);
    EXPECT_EQ(back[i].gpus, jobs[i].gpus);
    EXPECT_EQ(back[i].user, jobs[i].user);
    EXPECT_EQ(back[i].checkpointable, jobs[i].checkpointable);
  }
}

}  // namespace
}  // namespace dl
