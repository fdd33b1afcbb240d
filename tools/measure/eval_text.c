/* The default evaluation text of `nib eval`: short, plain children's-story
 * English written for nibble (the small reference models were trained on
 * text of this kind), so accuracy numbers are comparable from run to run. */
const char nib_eval_default_text[] =
    "Once upon a time, there was a little girl named Mia. She lived in a small house near a big "
    "forest with her mom, her dad and a brown dog called Max. Every morning Mia and Max ran to "
    "the garden to look at the flowers. One day, Mia saw a red bird sitting on the fence. The "
    "bird looked sad because it could not find its home. Mia wanted to help the bird. She asked "
    "her mom, \"Can we help the little bird find its nest?\" Her mom smiled and said, \"Yes, "
    "let's look in the tall tree by the river.\" They walked to the river together. Max ran "
    "ahead and barked at the tree. High up in the branches, they saw a small nest with two baby "
    "birds inside. The red bird flew up to the nest and sang a happy song. Mia clapped her hands "
    "and laughed. On the way home, it started to rain. Mia and Max jumped in the puddles and got "
    "very wet. When they came back to the house, Dad made warm soup and Mom gave Mia a big soft "
    "towel. Mia told her dad about the bird, the nest and the rain. \"You were very kind today,\" "
    "said Dad. Mia felt proud. That night, she dreamed of birds and trees and rivers, and she "
    "slept with a smile on her face.\n"
    "Tom was a boy who loved to build things. He had a box of blocks, some sticks and a roll of "
    "tape. One sunny day, he decided to build a boat. He worked all morning. When the boat was "
    "ready, he took it to the pond with his friend Sue. They put the boat on the water and "
    "watched it float. A frog jumped on the boat and sat there like a captain. Tom and Sue "
    "laughed so much that they fell on the grass. Then the wind blew and the boat moved to the "
    "other side of the pond. The frog jumped off and swam away. Tom said, \"Next time I will "
    "build a bigger boat, so we can all ride in it!\" Sue said that was a good idea, and they "
    "went home to eat cookies and drink milk.\n";
